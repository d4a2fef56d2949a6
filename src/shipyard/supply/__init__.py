"""Supply chain: what is inside each artifact (CycloneDX SBOM), who built it from what (in-toto
Statement with a SLSA Provenance v1 predicate, signed as a DSSE envelope), `shipyard verify`,
and the reproducibility check that builds twice and compares bytes."""
