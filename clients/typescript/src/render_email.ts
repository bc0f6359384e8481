// What the renderers print of an e-mail package (EML, MSG), as the Python SDK's
// docparse/render_email.py does: its header block above the body, and a section per attachment
// ("Attachment 1: report.pdf") holding the attachment's own package rendered, or why it was not
// read.

import type { Attachment, ReadingPackage } from "./gen/docparse/v1/reading_package_pb.js";
import { oneLine } from "./render_layout.js";

export const isEmail = (pkg: ReadingPackage): boolean => pkg.email !== undefined;

/** The header block's lines as [name, value], the empty ones left out; the subject only when
 * asked (Markdown and HTML print it as the heading instead). */
export function headerFields(pkg: ReadingPackage, subject: boolean): [string, string][] {
  const e = pkg.email;
  if (e === undefined) return [];
  const fields: [string, string][] = [
    ["From", e.sender],
    ["To", e.to.join(", ")],
    ["Cc", e.cc.join(", ")],
    ["Bcc", e.bcc.join(", ")],
    ["Date", e.date],
  ];
  if (subject) fields.push(["Subject", e.subject]);
  return fields
    .map(([name, value]): [string, string] => [name, oneLine(value)])
    .filter(([, value]) => value !== "");
}

export function attachmentTitle(attachment: Attachment): string {
  return `Attachment ${attachment.number}: ${oneLine(attachment.filename) || "(no name)"}`;
}

/** Why an attachment has no package, in words. */
export function attachmentNote(attachment: Attachment): string {
  const reason = attachment.reason ? ` (${attachment.reason})` : "";
  const message = oneLine(attachment.reasonMessage);
  return message ? `Not read${reason}: ${message}` : `Not read${reason}`;
}
