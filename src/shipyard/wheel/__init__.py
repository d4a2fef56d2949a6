"""The wheel pipeline: build, repair and label, check, index, test, record."""
