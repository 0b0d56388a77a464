"""`orchard serve` that stops for good at one point of a dataset's publication, so that a test's SIGKILL lands
exactly there: ``python tests/integration/_serve_paused.py POINT MARKER serve --port ...``.

POINT: ``fsync`` (one column file fsynced by the publishing pool, the others maybe not), ``rename`` (every file
fsynced and schema.json written, the staging directory not yet renamed into ``datasets/``), ``insert`` (the
directory renamed into place, the metadata row not yet inserted). The process writes MARKER when it gets there,
then the thread that got there waits forever."""

import sys
import threading
from pathlib import Path


def main() -> int:
    point, marker, argv = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]

    def pause():
        marker.write_text(point)
        threading.Event().wait()

    if point == "fsync":
        from service.storage import artifacts

        sync_path = artifacts.sync_path

        def sync_then_pause(path, **kw):
            sync_path(path, **kw)
            if threading.current_thread().name.startswith("orchard-fsync"):  # publish_dataset's pool
                pause()

        artifacts.sync_path = sync_then_pause
    elif point == "rename":
        import os

        replace = os.replace

        def pause_then_replace(src, dst, **kw):
            if Path(src).name.startswith("ds-") and Path(dst).parent.name == "datasets":
                pause()
            return replace(src, dst, **kw)

        os.replace = pause_then_replace
    elif point == "insert":
        from service.storage.metadata import MetadataStore

        insert = MetadataStore.insert_dataset

        def pause_then_insert(self, record):
            pause()
            return insert(self, record)

        MetadataStore.insert_dataset = pause_then_insert
    else:
        raise SystemExit(f"unknown point {point!r}")
    from service.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
