"""The bundled local model for tests, computed in a child process (see child_process.py).

`IsolatedLocalModel` is a `LocalChatModel` in every way the graph sees (fields, bind_tools, sync
and async calls), but its `_generate` runs in a child that holds the real llama.cpp model. If
llama.cpp crashes (as it did on CPUs with AMX), the calling test fails with ChildDied, naming the
signal and quoting the child's stderr, and the rest of the test run goes on.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import PrivateAttr

from bashgraph.graph.models.local import LocalChatModel, bundled_model_path
from tests.support.child_process import ChildProcess


class IsolatedLocalModel(LocalChatModel):
    """LocalChatModel whose generation runs in a child process; `close()` ends the child."""

    _child: ChildProcess | None = PrivateAttr(default=None)

    def child_class(self) -> type[LocalChatModel]:
        """The model class built in the child (a test can substitute one that crashes)."""
        return LocalChatModel

    def child(self) -> ChildProcess:
        if self._child is None:
            factory = functools.partial(self.child_class(), **self._identifying_params)
            self._child = ChildProcess(factory, name="local model process")
        return self._child

    def close(self) -> None:
        if self._child is not None:
            self._child.close()

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        result: ChatResult = self.child().call("_generate", messages, stop, None, **kwargs)
        return result


def isolated_local_model(**fields: Any) -> IsolatedLocalModel:
    """The bundled SmolLM2 run in a child process; `fields` override LocalChatModel's."""
    fields.setdefault("model_path", str(bundled_model_path()))
    return IsolatedLocalModel(**fields)


# ----------------------------------------------------------------------------- a deliberate crash


class SegfaultingModel(LocalChatModel):
    """Says so on stderr, then dies of SIGSEGV inside a call: what a native crash looks like."""

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        print("about to crash on purpose", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
        raise AssertionError("still alive after SIGSEGV")


class CrashingIsolatedModel(IsolatedLocalModel):
    """An IsolatedLocalModel whose child crashes on every call."""

    def child_class(self) -> type[LocalChatModel]:
        return SegfaultingModel
