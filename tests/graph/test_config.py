"""Settings that are no value are refused when the config is made, with one line naming them."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from bashgraph.graph import AgentConfig, ConfigError


@pytest.mark.parametrize(("setting", "words"), [
    ({"timeout_s": math.nan}, "timeout_s must be a finite number"),
    ({"request_timeout_s": math.inf}, "request_timeout_s must be a finite number"),
    ({"grace_s": math.inf}, "grace_s must be a finite number"),
    ({"timeout_s": 0.0}, "timeout_s must be positive"),
    ({"model_max_retries": -3}, "model_max_retries must be zero or more"),
    ({"max_replans": -1}, "max_replans must be zero or more"),
    ({"base_url": "http://[::1"}, "is not a URL"),
    ({"base_url": "localhost:8080"}, "must be an http:// or https:// URL with a host"),
])
def test_a_setting_that_is_no_value_is_refused(setting: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)):
        AgentConfig(**setting)


@pytest.mark.parametrize("base_url", [None, "", "http://127.0.0.1:8080/v1", "https://api.example.com/v1"])
def test_a_base_url_may_be_unset_empty_or_an_http_url(base_url: str | None) -> None:
    """Empty, as a compose file's `BASHGRAPH_BASE_URL=` gives it, means not set."""
    assert AgentConfig(base_url=base_url).chat.base_url == base_url


def test_zero_retries_and_zero_grace_are_values() -> None:
    AgentConfig(model_max_retries=0, grace_s=0.0, max_replans=0, max_spawn_retries=0)
