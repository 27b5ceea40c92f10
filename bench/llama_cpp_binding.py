"""llama.cpp through PyPI's llama-cpp-python, as the bench/ scripts load it.

llama.cpp built natively on a CPU with AMX repacks quantised weights into its AMX buffer type
("extra" buffer types). On the Sapphire Rapids VMs this project runs on, llama-cpp-python 0.3.36
built that way crashes (SIGSEGV) in its first eval of SmolLM2-135M Q4_1 after repacking, so the
scripts turn extra buffer types off unless LLAMA_CPP_EXTRA_BUFTS=1: llama.cpp then runs its
AVX-512 (VNNI) CPU kernels, the ones it takes on any machine without AMX. Say which in a figure's
note (load() returns whether they were on).
"""
import os
import sys


def load():
    """Imports llama_cpp (exits naming the package when it is missing) and sets the default model
    parameters' use_extra_bufts from LLAMA_CPP_EXTRA_BUFTS. Returns (module, extra_bufts_on)."""
    try:
        import llama_cpp
        import llama_cpp.llama as llama_module
    except ImportError:
        sys.exit("llama-cpp-python is not installed: python3 -m pip install llama-cpp-python")
    extra = os.environ.get("LLAMA_CPP_EXTRA_BUFTS", "0") == "1"
    defaults = llama_module.llama_cpp.llama_model_default_params
    if not getattr(defaults, "_iron_wrapped", False):
        def model_params():
            params = defaults()
            if hasattr(params, "use_extra_bufts"):  # older bindings have no such field
                params.use_extra_bufts = extra
            return params
        model_params._iron_wrapped = True
        llama_module.llama_cpp.llama_model_default_params = model_params
    return llama_cpp, extra
