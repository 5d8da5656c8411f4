"""Live capture: the only package of tuiprof that imports torch."""
