"""Compiled code of the project: C/C++/CUDA sources read at token level."""
