"""Client of act's artifact server for the local stand-ins of actions/upload-artifact and
actions/download-artifact (`shipyard ci run` stages this file into both).

It speaks the artifacts v4 protocol that upload-artifact@v4 speaks (CreateArtifact, a zip PUT to
the signed URL, FinalizeArtifact; ListArtifacts and GetSignedArtifactURL to download) against
$ACTIONS_RESULTS_URL with $ACTIONS_RUNTIME_TOKEN, which act gives every step. Standard library
only: it runs on the job's own python3.

    python3 artifacts.py upload NAME IF_NO_FILES_FOUND INCLUDE_HIDDEN   (paths: $ARTIFACT_PATHS)
    python3 artifacts.py download NAME PATTERN DEST MERGE_MULTIPLE
"""

from __future__ import annotations

import base64
import fnmatch
import glob
import hashlib
import http.client
import io
import json
import os
import sys
import urllib.request
import zipfile

SERVICE = "twirp/github.actions.results.api.v1.ArtifactService/"
GLOB = set("*?[")


def _backend_ids() -> tuple[str, str]:
    """The run and job ids act put in the runtime token's `Actions.Results:<run>:<job>` scope."""
    token = os.environ["ACTIONS_RUNTIME_TOKEN"]
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    for scope in str(claims.get("scp", "")).split():
        parts = scope.split(":")
        if parts[0] == "Actions.Results" and len(parts) == 3:
            return parts[1], parts[2]
    raise SystemExit("::error::the runtime token has no Actions.Results scope; is act's artifact server on?")


def _call(method: str, body: dict) -> dict:
    run, job = _backend_ids()
    body = {"workflow_run_backend_id": run, "workflow_job_run_backend_id": job, **body}
    url = os.environ["ACTIONS_RESULTS_URL"].rstrip("/") + "/" + SERVICE + method
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {os.environ['ACTIONS_RUNTIME_TOKEN']}"})
    with urllib.request.urlopen(request, timeout=300) as response:
        text = response.read().decode()
    return json.loads(text) if text else {}


def _search_root(pattern: str) -> str:
    """The part of a path pattern before its first component with a wildcard."""
    parts = pattern.split("/")
    kept = []
    for part in parts:
        if set(part) & GLOB:
            break
        kept.append(part)
    return "/".join(kept) or "."


def _files(patterns: list[str], include_hidden: bool) -> tuple[str, list[str]]:
    """The files the patterns name, and the root their names in the zip are relative to (the
    common folder of the search paths, as upload-artifact does)."""
    excludes = [p[1:] for p in patterns if p.startswith("!")]
    found: list[str] = []
    roots = []
    for pattern in (p for p in patterns if not p.startswith("!")):
        root = _search_root(pattern)
        roots.append(os.path.dirname(os.path.abspath(root)) if os.path.isfile(root) else os.path.abspath(root))
        for match in glob.glob(pattern, recursive=True) if set(pattern) & GLOB else [pattern]:
            if os.path.isdir(match):
                # symbolic links are followed, as upload-artifact's globber does: dist/conda is
                # a link to the live generation of the channel (plumbing/generations.py)
                for folder, _, names in os.walk(match, followlinks=True):
                    found += [os.path.join(folder, name) for name in names]
            elif os.path.isfile(match):
                found.append(match)
    found = [os.path.abspath(f) for f in found if not any(fnmatch.fnmatch(f, e) for e in excludes)]
    root = os.path.commonpath(roots) if roots else os.getcwd()
    if not include_hidden:
        found = [f for f in found if not any(part.startswith(".") for part in os.path.relpath(f, root).split(os.sep))]
    return root, sorted(dict.fromkeys(found))


def upload(name: str, if_no_files_found: str, include_hidden: str, compression_level: str = "6") -> None:
    patterns = [line.strip() for line in os.environ.get("ARTIFACT_PATHS", "").splitlines() if line.strip()]
    root, files = _files(patterns, include_hidden == "true")
    if not files:
        message = f"No files were found with the provided path: {' '.join(patterns)}. No artifacts will be uploaded."
        if if_no_files_found == "error":
            raise SystemExit(f"::error::{message}")
        print(f"::warning::{message}" if if_no_files_found == "warn" else message)
        return
    if compression_level not in [str(n) for n in range(10)]:
        raise SystemExit(f"::error::Invalid compression-level {compression_level!r}: give 0 to 9")
    level = int(compression_level)
    buffer = io.BytesIO()
    # level 0 stores, as v4 does (its zip library's level 0)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED if level else zipfile.ZIP_STORED,
                         compresslevel=level) as archive:
        for path in files:
            archive.write(path, os.path.relpath(path, root))
    data = buffer.getvalue()
    created = _call("CreateArtifact", {"name": name, "version": 4})
    url = created["signedUploadUrl"] if "signedUploadUrl" in created else created["signed_upload_url"]
    put = urllib.request.Request(url + "&comp=block", data=data, method="PUT",
                                 headers={"Content-Type": "application/zip", "x-ms-blob-type": "BlockBlob"})
    with urllib.request.urlopen(put, timeout=3600):
        pass
    _call("FinalizeArtifact", {"name": name, "size": str(len(data)),
                               "hash": "sha256:" + hashlib.sha256(data).hexdigest()})
    print(f"uploaded artifact {name}: {len(files)} files, {len(data)} bytes (local stand-in for "
          f"actions/upload-artifact, act's artifact server)")


def download(name: str, pattern: str, dest: str, merge_multiple: str) -> None:
    try:
        listed = _call("ListArtifacts", {"name_filter": name} if name else {}).get("artifacts", [])
    except http.client.RemoteDisconnected:
        # act's artifact server reads the run's folder, which exists from the first upload on;
        # before it, the server panics and drops the connection: no artifact yet.
        listed = []
    names = [a["name"] for a in listed if not pattern or fnmatch.fnmatch(a["name"], pattern)]
    if name and not names:
        raise SystemExit(f"::error::Unable to download artifact(s): Artifact not found for name: {name}")
    for each in names:
        signed = _call("GetSignedArtifactURL", {"name": each})
        url = signed.get("signedUrl") or signed["signed_url"]
        with urllib.request.urlopen(url, timeout=3600) as response:
            data = response.read()
        into = dest if name or merge_multiple == "true" else os.path.join(dest, each)
        os.makedirs(into, exist_ok=True)
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            archive.extractall(into)
        print(f"downloaded artifact {each} into {into} (local stand-in for actions/download-artifact)")
    if not names:
        print(f"no artifact matched {pattern or 'anything'}")


if __name__ == "__main__":
    if sys.argv[1] == "upload":
        upload(*sys.argv[2:6])
    else:
        download(*sys.argv[2:6])
