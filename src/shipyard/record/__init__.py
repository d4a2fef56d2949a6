"""The record: dist/manifest.json, merging fragments, the gate, the build report."""
