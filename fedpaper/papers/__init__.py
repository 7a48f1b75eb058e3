"""The paper packages, one per paper (fedpaper/papers/<paper>/): each composes the lower layers into
its artifacts (profiles, runs, drawing, claims) and declares them in explicit tables of its
`__init__.py`, which `fedpaper.outputs.registry.load_papers()` reads. Nothing here imports a paper."""
