"""The runtime of compiled operators: what a call needs and nothing of the compiler.

It imports only the IR, the simulator, the CPU backend's build-and-call half, the op table and
the leaves below them, never the front end, the checker, the passes or the emitters. ``ptodsl gen``
copies exactly this closure into every generated package (``<package>/_ptodsl/``), so a package
runs its shipped IR and C++ with numpy, ml_dtypes and PyYAML alone; ``tests/test_layers.py`` and
the generated package's own tests hold it to that.
"""
