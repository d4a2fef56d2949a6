"""The GitHub Actions release pipeline, generated from release.yaml (`shipyard ci generate`).

`jobs` groups the matrix into runner jobs, `workflow` turns them into the two workflow files,
`actions` pins the third-party actions, `runners` holds the facts about GitHub's runners that
release.yaml does not describe, `drift` compares the committed files with a fresh generation.
"""
