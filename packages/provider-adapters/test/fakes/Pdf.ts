/** Builds small valid PDFs with known text, for the PDF parser and file-parser plugin tests. */

const escapePdf = (text: string) => text.replace(/[\\()]/g, "\\$&")

/** A minimal valid PDF: one page per string, each drawn in Helvetica, with a correct xref table. */
export const minimalPdf = (pages: ReadonlyArray<string>): Buffer => {
  const objects: Array<string> = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    `<< /Type /Pages /Kids [${pages.map((_, i) => `${4 + i * 2} 0 R`).join(" ")}] /Count ${pages.length} >>`,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
  ]
  pages.forEach((text, i) => {
    const stream = `BT /F1 24 Tf 72 720 Td (${escapePdf(text)}) Tj ET`
    objects.push(
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${
        5 + i * 2
      } 0 R >>`,
      `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`
    )
  })
  let out = "%PDF-1.4\n"
  const offsets: Array<number> = []
  objects.forEach((object, i) => {
    offsets.push(out.length)
    out += `${i + 1} 0 obj\n${object}\nendobj\n`
  })
  const xref = out.length
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`
  out += offsets.map((offset) => `${String(offset).padStart(10, "0")} 00000 n \n`).join("")
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return Buffer.from(out, "latin1")
}

/** The base64 text of `minimalPdf(pages)`, as a `document` block's `source.data`. */
export const pdfBase64 = (pages: ReadonlyArray<string>): string => minimalPdf(pages).toString("base64")
