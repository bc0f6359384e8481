"""Password-protected OpenDocument packages (ODF 1.2 part 3, §3.4 and LibreOffice's
extensions), decrypted with the `cryptography` package:

- per part (META-INF/manifest.xml has a manifest:encryption-data for content.xml, styles.xml,
  pictures, ...): each part is deflated, then encrypted; AES-256-CBC (W3C padding) with a
  PBKDF2-HMAC-SHA1 key from the SHA-256 of the password (ODF 1.2, LibreOffice 3.4 and later),
  or Blowfish CFB with a SHA-1 start key (OpenOffice.org before 3.4);
- the whole package ("encrypted-package", LibreOffice 7.6 and later): the inner zip deflated,
  then AES-256-GCM with an Argon2id (or PBKDF2) key.

A wrong password is told by the manifest's checksum of the first 1 KiB (CBC, CFB) or by the GCM
tag. Key derivation costs come from the file, so they are bounded (a hostile file could ask for
a billion PBKDF2 rounds or gigabytes of Argon2 memory) and decrypted parts inflate only up to
the package's size limit.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from dataclasses import dataclass
from typing import Any

from docparse.reasons import ErrorReason
from parser_svc.parsers import ParseFailure, corrupt, too_large
from parser_svc.parsers.password import candidates

MANIFEST = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"
LOEXT = "urn:org:documentfoundation:names:experimental:office:xmlns:loext:1.0"
ARGON2ID = "urn:org:documentfoundation:names:experimental:office:manifest:argon2id"
MAX_PBKDF2_ROUNDS = 10_000_000
MAX_ARGON2_MEMORY_KIB = 512 * 1024
MAX_ARGON2_PASSES = 64
MAX_ARGON2_LANES = 64
_M = f"{{{MANIFEST}}}"


def _unsupported(message: str) -> ParseFailure:
    return ParseFailure(ErrorReason.UNSUPPORTED_FORMAT, message)


def _b64(node: Any, name: str) -> bytes:
    try:
        return base64.b64decode(node.get(_M + name) or "", validate=False)
    except (binascii.Error, ValueError) as err:
        raise corrupt(f"the package's encryption data is damaged: {err}") from err


def _int(node: Any, name: str, default: int) -> int:
    try:
        return int(node.get(name) or default)
    except ValueError as err:
        raise corrupt(f"the package's encryption data is damaged: {err}") from err


@dataclass
class Encryption:
    """One encrypted part's parameters (a manifest:encryption-data)."""

    algorithm: str
    iv: bytes
    start_key: str
    start_key_size: int
    kdf: str
    salt: bytes
    rounds: int
    key_size: int
    checksum_type: str
    checksum: bytes
    argon2: tuple[int, int, int]  # passes, memory (KiB), lanes

    @classmethod
    def of(cls, data: Any) -> Encryption:
        algorithm = data.find(_M + "algorithm")
        start = data.find(_M + "start-key-generation")
        derivation = data.find(_M + "key-derivation")
        if algorithm is None or derivation is None:
            raise corrupt("the package's encryption data names no algorithm or key derivation")
        name = algorithm.get(_M + "algorithm-name") or ""
        modern = "aes256" in name
        start_name = start.get(_M + "start-key-generation-name", "") if start is not None else ""
        return cls(
            algorithm=name,
            iv=_b64(algorithm, "initialisation-vector"),
            start_key=start_name or "SHA1",
            start_key_size=_int(start, _M + "key-size", 32) if start is not None else 20,
            kdf=derivation.get(_M + "key-derivation-name") or "PBKDF2",
            salt=_b64(derivation, "salt"),
            rounds=_int(derivation, _M + "iteration-count", 1024),
            key_size=_int(derivation, _M + "key-size", 32 if modern else 16),
            checksum_type=data.get(_M + "checksum-type") or "",
            checksum=_b64(data, "checksum"),
            argon2=(
                _int(derivation, f"{{{LOEXT}}}argon2-iterations", 3),
                _int(derivation, f"{{{LOEXT}}}argon2-memory", 65536),
                _int(derivation, f"{{{LOEXT}}}argon2-lanes", 4),
            ),
        )

    def key(self, password: str) -> bytes:
        secret = password.encode("utf-8")
        if "sha256" in self.start_key.lower():
            start = hashlib.sha256(secret).digest()
        elif "sha1" in self.start_key.lower():
            start = hashlib.sha1(secret).digest()[: self.start_key_size or 20]
        else:
            raise _unsupported(f"the package's start key ({self.start_key}) is not supported")
        if not 1 <= self.key_size <= 64:
            raise corrupt(f"the package's key size {self.key_size} is not a key size")
        if self.kdf == ARGON2ID:
            return self._argon2(start)
        if self.kdf != "PBKDF2":
            raise _unsupported(f"the package's key derivation ({self.kdf}) is not supported")
        if not 1 <= self.rounds <= MAX_PBKDF2_ROUNDS:
            raise _unsupported(f"the package asks for {self.rounds} PBKDF2 rounds")
        return hashlib.pbkdf2_hmac("sha1", start, self.salt, self.rounds, self.key_size)

    def _argon2(self, start: bytes) -> bytes:
        from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

        passes, memory, lanes = self.argon2
        if not (
            1 <= passes <= MAX_ARGON2_PASSES
            and 1 <= lanes <= MAX_ARGON2_LANES
            and 8 * lanes <= memory <= MAX_ARGON2_MEMORY_KIB
        ):
            raise _unsupported(
                f"the package's Argon2id parameters ({passes} passes, {memory} KiB, {lanes} "
                "lanes) are beyond what this service runs"
            )
        kdf = Argon2id(
            salt=self.salt, length=self.key_size, iterations=passes, lanes=lanes, memory_cost=memory
        )
        return kdf.derive(start)

    def decrypt(self, data: bytes, key: bytes) -> bytes | None:
        """The decrypted (still deflated) bytes; None when the key is wrong."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        try:
            if self.algorithm.endswith("aes256-gcm"):
                from cryptography.hazmat.primitives.ciphers.aead import AESGCM

                body = data[len(self.iv) :] if data[: len(self.iv)] == self.iv else data
                return AESGCM(key).decrypt(self.iv, body, None)
            if self.algorithm.endswith("aes256-cbc"):
                cipher = Cipher(algorithms.AES(key), modes.CBC(self.iv))
                plain = _run(cipher, data[: len(data) // 16 * 16])
                return plain if self._checks(plain, 16) else None
            if "blowfish" in self.algorithm.lower():
                from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish

                plain = _run(Cipher(Blowfish(key), _cfb(self.iv)), data)
                return plain if self._checks(plain, 0) else None
        except InvalidTag:
            return None
        except ValueError as err:  # an IV or key of the wrong size
            raise corrupt(f"the package's encryption data is damaged: {err}") from err
        raise _unsupported(f"the package's cipher ({self.algorithm}) is not supported")

    def _checks(self, plain: bytes, block: int) -> bool:
        """The checksum over the first 1 KiB (or all) of the decrypted part; padding stripped
        (W3C padding: the last byte counts it) when `block`."""
        if not self.checksum:
            return True
        kind = self.checksum_type.lower()
        digest = hashlib.sha256 if "sha256" in kind else hashlib.sha1
        size = 1024 if "1k" in kind else len(plain)
        forms = [plain]
        if block and plain and 1 <= plain[-1] <= block:
            forms.append(plain[: -plain[-1]])
        return any(digest(form[:size]).digest() == self.checksum for form in forms)

    def unpad(self, plain: bytes) -> bytes:
        if self.algorithm.endswith("aes256-cbc") and plain and 1 <= plain[-1] <= 16:
            return plain[: -plain[-1]]
        return plain


def _cfb(iv: bytes) -> Any:
    """CFB mode, from where this version of `cryptography` keeps it (decrepit since 47)."""
    try:
        from cryptography.hazmat.decrepit.ciphers.modes import CFB
    except ImportError:
        from cryptography.hazmat.primitives.ciphers.modes import CFB
    return CFB(iv)


def _run(cipher: Any, data: bytes) -> bytes:
    decryptor = cipher.decryptor()
    return bytes(decryptor.update(data) + decryptor.finalize())


def inflate(data: bytes, limit: int, what: str) -> bytes:
    """Raw-deflated `data` inflated, refused past `limit` bytes."""
    inflater = zlib.decompressobj(-15)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as err:
        raise corrupt(f"the decrypted {what} cannot be inflated: {err}") from err
    if len(out) > limit:
        raise too_large(f"the decrypted {what} inflates past {limit} bytes (a zip bomb?)")
    return out


def encrypted_parts(manifest: Any) -> dict[str, Encryption]:
    """The manifest's encrypted parts by path."""
    parts: dict[str, Encryption] = {}
    if manifest is None:
        return parts
    for entry in manifest.iter(_M + "file-entry"):
        data = entry.find(_M + "encryption-data")
        if data is not None:
            parts[entry.get(_M + "full-path") or ""] = Encryption.of(data)
    return parts


def open_part(raw: bytes, spec: Encryption, password: str, limit: int, what: str) -> bytes:
    """A part's plain bytes: decrypted with the first password form that opens it, inflated."""
    tries = candidates(password)
    if not tries:
        raise ParseFailure(
            ErrorReason.PASSWORD_REQUIRED,
            f"the OpenDocument {what} is encrypted and needs a password",
        )
    for candidate in tries:
        plain = spec.decrypt(raw, spec.key(candidate))
        if plain is not None:
            return inflate(spec.unpad(plain), limit, what)
    raise ParseFailure(ErrorReason.WRONG_PASSWORD, f"the password does not open this {what}")
