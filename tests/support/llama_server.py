"""llama-cpp-python's OpenAI-compatible server, started with the bundled model's AMX workaround.

    python -m tests.support.llama_server --model PATH --host 127.0.0.1 --port N \\
        --chat_format chatml-function-calling

The arguments are the server's own (`python -m llama_cpp.server --help`). Before the server loads
the model, `llama_model_default_params` is wrapped so that weights are loaded without llama.cpp's
extra buffer types (see `bashgraph.graph.models.local.without_extra_buffers`): with them, llama.cpp
crashes on Intel Xeons with AMX at the first decode. The server has no option for this field.
"""

from __future__ import annotations

import runpy


def main() -> None:
    import llama_cpp.llama_cpp as native

    from bashgraph.graph.models.local import without_extra_buffers

    # For the whole process: it only serves this model.
    native.llama_model_default_params = without_extra_buffers(native.llama_model_default_params)
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
