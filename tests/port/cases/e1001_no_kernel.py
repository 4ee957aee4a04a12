"""A helper alone is no kernel."""
import pypto


@pypto.frontend.function
def double(x):
    return x * 2.0
