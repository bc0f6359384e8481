"""Images of an HTML body: a data: URI decoded in place (bounded by the asset size limit before
it is decoded), or a file a container holds (an EPUB's images, through an `ImageSource`); each
stored once through the AssetSink, its pixel size read from its header (never decoded)."""

from __future__ import annotations

import base64
import binascii
import io
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import EXT_MIME, IMAGES_NONE, AssetSink

# A container's file named by an image's src (relative to the page): its bytes and MIME type,
# or None when the container has no such image.
ImageSource = Callable[[str], tuple[bytes, str] | None]

_DATA_URI = re.compile(r"data:(image/[a-z0-9.+-]+)?((?:;[a-z0-9=._+-]+)*),", re.I)
_HREFS = ("src", "href", "xlink:href", "{http://www.w3.org/1999/xlink}href")


def image_src(element: Any) -> str:
    for name in _HREFS:
        value = element.get(name)
        if value:
            return str(value).strip()
    return ""


def data_uri(src: str, limit: int) -> tuple[bytes, str] | None:
    """The bytes and MIME type of an image data: URI; None for another URI, a non-image, one
    whose bytes would pass `limit`, or a damaged one."""
    found = _DATA_URI.match(src)
    if found is None or not found.group(1):
        return None
    payload = src[found.end() :]
    is_base64 = ";base64" in found.group(2).lower()
    if (len(payload) * 3 // 4 if is_base64 else len(payload) // 3) > limit:
        return None
    try:
        data = base64.b64decode(payload) if is_base64 else unquote_to_bytes(payload)
    except (binascii.Error, ValueError):
        return None
    if len(data) > limit:
        return None
    return data, found.group(1).lower()


def pixel_size(data: bytes) -> tuple[int, int]:
    """Width and height from the image's header (Pillow reads no pixels to answer)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            return int(width), int(height)
    except Exception:
        return 0, 0


def image_ref(element: Any, assets: AssetSink, source: ImageSource | None) -> rp.ImageRef | None:
    """The image as a stored asset; None when it is not stored (no such bytes, images not
    asked for, over a limit): the page then shows its alt text."""
    options = assets.options
    if options.images == IMAGES_NONE or options.assets_dir is None:
        return None
    src = image_src(element)
    if not src:
        return None
    found = data_uri(src, options.max_asset_bytes)
    if found is None and source is not None and not src.lower().startswith("data:"):
        found = source(src)
    if found is None:
        return None
    data, mime = found
    mime = EXT_MIME.get(mime.rpartition("/")[2], mime)
    width, height = (0, 0) if mime == "image/svg+xml" else pixel_size(data)
    asset_id = assets.add(data, mime, width, height)
    if not asset_id:
        return None
    return rp.ImageRef(asset_id=asset_id, mime_type=mime, width=width, height=height)
