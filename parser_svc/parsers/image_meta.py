"""An image's own metadata (EXIF and TIFF tags, PNG text chunks) as DocumentMetadata.

Title, author and creating software where the file names them; camera, date and copyright in
`extra`. Location (GPS) is left out: a package is shared more widely than a photo's owner may
expect. Text that is not clean Unicode (binary junk in a tag) is left out, never mangled.
"""

from __future__ import annotations

from PIL import Image

from docparse.v1 import reading_package_pb2 as rp

# EXIF / TIFF tag -> DocumentMetadata field or `extra` key.
_TAG_FIELDS = {0x010E: "title", 0x013B: "author", 0x0131: "creator"}
_TAG_EXTRA = {
    0x010F: "camera_make",
    0x0110: "camera_model",
    0x0132: "date_time",
    0x8298: "copyright",
}
# PNG text chunks (the keywords of the PNG specification) -> field or `extra` key.
_PNG_FIELDS = {
    "Title": "title",
    "Author": "author",
    "Software": "creator",
    "Description": "subject",
}
_PNG_EXTRA = {"Creation Time": "date_time", "Copyright": "copyright"}
_MAX_CHARS = 1000


def _clean(value: object) -> str:
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return ""
    if not isinstance(value, str):
        return ""
    text = " ".join(value.replace("\x00", " ").split())[:_MAX_CHARS]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return ""
    if "\ufffd" in text or any(not c.isprintable() for c in text):
        return ""
    return text


def _put(metadata: rp.DocumentMetadata, key: str, value: object, extra: bool) -> None:
    text = _clean(value)
    if not text:
        return
    if extra:
        metadata.extra.setdefault(key, text)
    elif not getattr(metadata, key):
        setattr(metadata, key, text)


def add_metadata(im: Image.Image, metadata: rp.DocumentMetadata) -> None:
    try:
        tags = dict(im.getexif())
    except Exception:
        tags = {}
    for tag, name in _TAG_FIELDS.items():
        _put(metadata, name, tags.get(tag), extra=False)
    for tag, name in _TAG_EXTRA.items():
        _put(metadata, name, tags.get(tag), extra=True)
    if im.format == "PNG":
        for key, name in _PNG_FIELDS.items():
            _put(metadata, name, im.info.get(key), extra=False)
        for key, name in _PNG_EXTRA.items():
            _put(metadata, name, im.info.get(key), extra=True)
