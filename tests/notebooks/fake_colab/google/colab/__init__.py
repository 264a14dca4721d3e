"""A stand-in for `google.colab` (tests only): just the `drive` module rgt's notebook uses."""
