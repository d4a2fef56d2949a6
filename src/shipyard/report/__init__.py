"""The release report and the release notes (#16), both generated from dist/manifest.json, the
matrix and feature_status.yaml: cells → grid, features, artifacts → HTML, terminal, Markdown."""
