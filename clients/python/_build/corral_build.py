"""A PEP 517 build backend in the standard library alone.

The package is pure Python with no dependencies, so its wheel is a zip of
corral/ and its metadata. With this backend ``pip install ./clients/python``
needs nothing from a package index (setuptools would have to be
downloaded, or installed with its ``wheel`` companion, on a machine
without network). It builds wheels, editable wheels and sdists.
"""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "corral"
VERSION = "0.1.0"
SUMMARY = "Python client for Corral, a GPU job scheduler (standard library only)"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST_INFO = "%s-%s.dist-info" % (NAME, VERSION)
TAG = "py3-none-any"


def _metadata():
    readme = ""
    path = os.path.join(ROOT, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: >=3.8\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, VERSION, SUMMARY, readme))


def _wheel_meta():
    return "Wheel-Version: 1.0\nGenerator: corral_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG


def _package_files():
    pkg = os.path.join(ROOT, NAME)
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py") or fn == "py.typed":
                full = os.path.join(dirpath, fn)
                yield full, os.path.relpath(full, ROOT).replace(os.sep, "/")


def _hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _write_wheel(wheel_directory, files):
    """files: (archive name, bytes) pairs; the dist-info is added."""
    name = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    files = list(files) + [
        (DIST_INFO + "/METADATA", _metadata().encode()),
        (DIST_INFO + "/WHEEL", _wheel_meta().encode()),
    ]
    record = "".join("%s,%s,%d\n" % (arc, _hash(data), len(data)) for arc, data in files)
    record += DIST_INFO + "/RECORD,,\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            z.writestr(zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0)), data)
        z.writestr(zipfile.ZipInfo(DIST_INFO + "/RECORD", date_time=(1980, 1, 1, 0, 0, 0)), record)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(d, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_meta())
    return DIST_INFO


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for full, arc in _package_files():
        with open(full, "rb") as f:
            files.append((arc, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file puts the source directory on sys.path.
    return _write_wheel(wheel_directory, [("%s_editable.pth" % NAME, (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/corral_build.py"]:
            full = os.path.join(ROOT, rel)
            if os.path.exists(full):
                t.add(full, arcname=base + "/" + rel)
        for full, arc in _package_files():
            t.add(full, arcname=base + "/" + arc)
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg_info)
        t.addfile(info, io.BytesIO(pkg_info))
    return name
