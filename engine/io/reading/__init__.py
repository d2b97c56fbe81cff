"""Reading untrusted files safely: streaming JSON/YAML record readers, size ceilings and decompression-bomb checks,
path confinement, type checks and field conventions for record values, the checks every loaded trajectory passes,
and the ``Problem`` log that reports each bad record instead of crashing or dropping it."""
