"""What the Office parsers share: the zip-bomb guard, encrypted-file handling (msoffcrypto) and
the core properties."""

from __future__ import annotations

import io
import zipfile
from typing import Any

from docparse.reasons import ErrorReason
from parser_svc.parsers import ParseFailure, ParseOptions, corrupt, describe_error, too_large
from parser_svc.parsers.password import candidates


def check_zip(data: bytes, options: ParseOptions, what: str) -> None:
    """Refuses a package whose parts would decompress to more than the cap. Python's zipfile
    never inflates a member past its declared size (it fails the CRC instead), so the sum of
    declared sizes bounds what any parser can be made to inflate."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, NotImplementedError) as err:
        # NotImplementedError: a damaged "version needed" or compression field
        raise corrupt(f"the {what} package (zip) is damaged: {err}") from err
    declared = sum(info.file_size for info in infos)
    if declared > options.max_unzipped_bytes:
        raise too_large(
            f"the {what} would decompress to {declared} bytes; the limit is "
            f"{options.max_unzipped_bytes} (a zip bomb?)"
        )


def parse_xml(data: bytes) -> Any:
    """An XML part, without entity expansion or network access."""
    from lxml import etree  # type: ignore[import-untyped]

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    return etree.fromstring(data, parser)


def is_encrypted(data: bytes) -> bool:
    import msoffcrypto  # type: ignore[import-untyped]

    try:
        return bool(msoffcrypto.OfficeFile(io.BytesIO(data)).is_encrypted())
    except Exception:
        return False


def decrypt(data: bytes, password: str, what: str) -> bytes:
    """The decrypted bytes of an encrypted Office file (OOXML in an OLE container, DOC, XLS)."""
    import msoffcrypto
    from msoffcrypto.exceptions import InvalidKeyError  # type: ignore[import-untyped]

    tries = candidates(password)
    if not tries:
        raise ParseFailure(
            ErrorReason.PASSWORD_REQUIRED, f"the {what} is encrypted and needs a password"
        )
    for candidate in tries:
        try:
            office = msoffcrypto.OfficeFile(io.BytesIO(data))
            try:
                office.load_key(password=candidate, verify_password=True)
            except TypeError:  # the legacy formats verify while decrypting
                office.load_key(password=candidate)
            out = io.BytesIO()
            office.decrypt(out)
            return out.getvalue()
        except InvalidKeyError:
            continue
        except MemoryError:
            raise
        except Exception as err:
            if "support" in str(err).lower():  # e.g. an encryption scheme msoffcrypto lacks
                raise ParseFailure(
                    ErrorReason.UNSUPPORTED_FORMAT,
                    f"the {what}'s encryption cannot be handled: {err}",
                ) from err
            raise corrupt(f"the encrypted {what} is damaged: {describe_error(err)}") from err
    raise ParseFailure(ErrorReason.WRONG_PASSWORD, f"the password does not open this {what}")
