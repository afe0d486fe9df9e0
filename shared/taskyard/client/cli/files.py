"""`taskyard` commands on a session's files: put one into its sandbox, list them, take one
out."""

from __future__ import annotations

import argparse
from pathlib import Path

from taskyard.client.cli.support import Subparsers, add_command, open_client, print_json

__all__ = ["register"]


def register(commands: Subparsers) -> None:
    """upload, files, download."""
    upload = add_command(commands, "upload", "put a file into a session's sandbox")
    upload.add_argument("local", type=Path)
    upload.add_argument("--session", required=True)
    upload.add_argument("--as", dest="path", help="its path in the sandbox (default: its name)")
    upload.set_defaults(run=_upload)

    files = add_command(commands, "files", "list the files in a session's sandbox",
                        json_output=True)  # fmt: skip
    files.add_argument("--session", required=True)
    files.set_defaults(run=_files)

    download = add_command(commands, "download", "copy a file out of a session's sandbox")
    download.add_argument("path")
    download.add_argument("--session", required=True)
    download.add_argument("-o", "--output", type=Path, help="where (default: its name, here)")
    download.set_defaults(run=_download)


def _upload(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        uploaded = client.upload(args.session, args.local, args.path)
    print(f"{uploaded['path']}: {uploaded['size']} bytes in session {args.session}")
    return 0


def _files(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        listed = client.files(args.session)
    if args.json:
        print_json(listed)
        return 0
    for info in listed:
        print(f"{info['size']:>12}  {info['path']}")
    return 0


def _download(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        data = client.download(args.session, args.path)
    target = args.output or Path(Path(args.path).name)
    target.write_bytes(data)
    print(f"{args.path}: {len(data)} bytes to {target}")
    return 0
