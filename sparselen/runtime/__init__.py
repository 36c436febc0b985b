"""The runtime layer, the bottom of the package: devices (CPU, CUDA, simulated CUDA) and
their threads, GPU slots and datasheets, the hardware a result ran on, provenance, atomic file
writes, seeds derived from names, and the lock that keeps two runs out of one checkout.

May import: nothing of the package (only the standard library, torch and the like).
"""
