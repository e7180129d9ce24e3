/**
 * The DocumentParser port with `unpdf` (the serverless build of Mozilla's pdf.js, pure JavaScript, no
 * native code and no worker). Input is bounded before any parsing: the decoded size, then the page count;
 * larger documents fail with `too_large` rather than being cut. Parsing runs on the calling thread, so
 * the limits are also what bounds the CPU one document can take.
 */
import { DocumentParser } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export interface PdfParserOptions {
  /** Largest decoded PDF accepted, in bytes. Default 32 MiB (Anthropic's request size limit). */
  readonly maxBytes?: number | undefined
  /** Most pages accepted. Default 100 (Anthropic's limit for PDF input). */
  readonly maxPages?: number | undefined
}

export const defaultMaxBytes = 32 * 1024 * 1024
export const defaultMaxPages = 100

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

const fail = (reason: DocumentParser.DocumentParseFailure, message: string) =>
  new DocumentParser.DocumentParseFailed({ reason, message })

/** Decodes and checks the base64 PDF: well-formed base64, within the size limit, starts like a PDF. */
export const decode = (
  base64: string,
  maxBytes: number
): Uint8Array | DocumentParser.DocumentParseFailed => {
  const compact = /\s/.test(base64) ? base64.replace(/\s+/g, "") : base64
  const bytes = Math.floor(compact.length * 3 / 4)
  if (bytes > maxBytes + 2) {
    return fail("too_large", `the PDF is about ${bytes} bytes; at most ${maxBytes} are accepted`)
  }
  if (compact.length % 4 !== 0 || !BASE64.test(compact)) return fail("invalid", "the document data is not valid base64")
  const data = Buffer.from(compact, "base64")
  if (data.length > maxBytes) {
    return fail("too_large", `the PDF is ${data.length} bytes; at most ${maxBytes} are accepted`)
  }
  if (!data.subarray(0, 1024).toString("latin1").includes("%PDF-")) {
    return fail("invalid", "the document data is not a PDF")
  }
  return new Uint8Array(data.buffer, data.byteOffset, data.length)
}

interface TextItemLike {
  readonly str?: string
  readonly hasEOL?: boolean
}

const describe = (cause: unknown): DocumentParser.DocumentParseFailed => {
  if (cause instanceof DocumentParser.DocumentParseFailed) return cause
  const error = cause as { name?: unknown; message?: unknown } | undefined
  if (error?.name === "PasswordException") return fail("invalid", "the PDF is password-protected")
  const message = typeof error?.message === "string" ? error.message : String(cause)
  return fail("invalid", `the PDF cannot be read: ${message}`)
}

/** A DocumentParser that extracts the text layer of PDFs (no OCR: scanned pages give no text). */
export const make = (options: PdfParserOptions = {}): DocumentParser.DocumentParserService => {
  const maxBytes = options.maxBytes ?? defaultMaxBytes
  const maxPages = options.maxPages ?? defaultMaxPages
  return {
    pdfToText: (base64) =>
      Effect.suspend(() => {
        const data = decode(base64, maxBytes)
        if (data instanceof DocumentParser.DocumentParseFailed) return Effect.fail(data)
        return Effect.tryPromise({
          try: async (signal) => {
            // loaded with the first PDF: most processes never parse one
            const { getDocumentProxy } = await import("unpdf")
            const pdf = await getDocumentProxy(data, { isEvalSupported: false, stopAtErrors: false, verbosity: 0 })
            const destroy = () => void pdf.destroy()
            signal.addEventListener("abort", destroy, { once: true })
            try {
              if (pdf.numPages > maxPages) {
                throw fail("too_large", `the PDF has ${pdf.numPages} pages; at most ${maxPages} are accepted`)
              }
              const pages: Array<string> = []
              for (let n = 1; n <= pdf.numPages && !signal.aborted; n++) {
                const page = await pdf.getPage(n)
                const content = await page.getTextContent()
                pages.push(
                  (content.items as ReadonlyArray<TextItemLike>)
                    .map((item) => (item.str ?? "") + (item.hasEOL === true ? "\n" : ""))
                    .join("")
                    .replace(/[^\S\n]+/g, " ")
                    .trim()
                )
                page.cleanup()
              }
              return pages.filter((page) => page !== "").join("\n\n")
            } finally {
              signal.removeEventListener("abort", destroy)
              await pdf.destroy()
            }
          },
          catch: describe
        })
      })
  }
}

/** The DocumentParser port backed by `unpdf`. */
export const layer = (options: PdfParserOptions = {}): Layer.Layer<DocumentParser.DocumentParser> =>
  Layer.sync(DocumentParser.DocumentParser, () => make(options))
