"""Every third-party action the workflows use, pinned by full commit SHA.

A tag can be moved to other code; a commit cannot. The tag each SHA was taken for is in the
comment beside it. These SHAs were read from public workflows that pin the same tags (this
machine cannot reach GitHub): verify each against the action's repository before the first
release (`git ls-remote https://github.com/actions/checkout refs/tags/v4.2.2`), and update them
here only; the generator writes them into every workflow.
"""

from __future__ import annotations

# action -> (commit SHA, the tag it was taken for); the generator writes the tag as a comment.
PINNED: dict[str, tuple[str, str]] = {
    "actions/checkout": ("11bd71901bbe5b1630ceea73d27597364c9af683", "v4.2.2"),
    "actions/setup-python": ("a26af69be951a213d495a4c3e4e4022e16d87065", "v5.6.0"),
    "actions/cache": ("5a3ec84eff668545956fd18022155c47e93e2684", "v4.2.3"),
    "actions/upload-artifact": ("ea165f8d65b6e75b540449e92b4886f43607fa02", "v4.6.2"),
    "actions/download-artifact": ("d3f86a106a0bac45b974a628896c90dbdf5c8093", "v4.3.0"),
}


def uses(action: str) -> str:
    """`owner/name@<sha>` for a `uses:` key."""
    return f"{action}@{PINNED[action][0]}"


def annotate(text: str) -> str:
    """Append `# <tag>` to every line of a rendered workflow that uses a pinned action."""
    for action, (sha, tag) in PINNED.items():
        text = text.replace(f"{action}@{sha}\n", f"{action}@{sha}  # {tag}\n")
    return text
