"""STUB of sgl_kernel, SGLang's compiled CUDA kernel package (its extension needs
libcuda and cannot load on a CPU machine). Some releases import it at module level
on every platform (0.5.x: sglang.srt.mem_cache.memory_pool_host imports
sgl_kernel.kvcacheio). Any submodule can be imported; any attribute is a name
whose call raises, so a test that reached a GPU kernel fails loudly instead of passing.
tests/sglang/run_releases.py names this stub in its output."""

import importlib.abc
import importlib.machinery
import sys
import types

STUB = True


class _Kernel:
    """A name from sgl_kernel: calling it raises; its attributes are more names
    (e.g. scalar_types.uint4b8, read at import to build tables)."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError("sgl_kernel stub: the GPU kernel %s was called" % self._name)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Kernel(self._name + "." + attr)

    def __repr__(self):
        return "<sgl_kernel stub %s>" % self._name


def _kernel(name):
    return _Kernel(name)


def _getattr_for(module_name):
    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _kernel(module_name + "." + attr)
    return __getattr__


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _getattr_for(spec.name)
        return module

    def exec_module(self, module):
        pass


sys.meta_path.append(_Finder())
__getattr__ = _getattr_for(__name__)
