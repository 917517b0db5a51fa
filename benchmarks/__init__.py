"""dpcvx's benchmark scripts (run them as scripts: ``python benchmarks/bench_speed.py`` or
``dpcvx bench speed``). They ship inside the package as ``dpcvx._benchmarks`` so that
``dpcvx bench`` works from an installed package; see ``benchmarks/README.md``."""
