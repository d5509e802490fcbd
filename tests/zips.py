"""Test helper: a folder as the bytes of a .zip whose members sit under the folder's own name (as a user zips a
corpus export), shared by the hardening and fuzz tests."""
import io
import zipfile
from pathlib import Path


def zip_folder(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, f"{folder.name}/{path.relative_to(folder).as_posix()}")
    return buffer.getvalue()
