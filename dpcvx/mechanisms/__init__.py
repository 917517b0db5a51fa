"""Mechanisms: noise calibration and sampling, and the private algorithms built on certified solves."""
