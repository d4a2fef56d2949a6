"""The release description: spec models, YAML loading, validation, the matrix, filters, feature markers,
project declarations, CUDA arch lists."""
