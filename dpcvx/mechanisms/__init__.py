"""Mechanisms: noise calibration and sampling, and private algorithms on certified solves."""
