"""Ready-to-train Docker images: plan (tags, labels) → context (verified wheels, pinned
dependencies) → build (BuildKit) → check (size budget, hygiene) → push."""
