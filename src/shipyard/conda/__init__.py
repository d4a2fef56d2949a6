"""conda packages: recipes rendered from release.yaml's variants, built with rattler-build."""
