import { describe, expect, it } from "@effect/vitest"
import { DocumentParser } from "@model-gateway/core"
import { Effect } from "effect"
import * as PdfDocumentParser from "../../src/plugins/PdfDocumentParser.js"
import { pdfBase64 as b64 } from "../fakes/Pdf.js"

const failure = (parser: DocumentParser.DocumentParserService, base64: string) =>
  Effect.runPromise(Effect.flip(parser.pdfToText(base64)))

describe("PdfDocumentParser", () => {
  const parser = PdfDocumentParser.make()

  it("extracts the text of a PDF", async () => {
    expect(await Effect.runPromise(parser.pdfToText(b64(["Hello gateway (42) \\ done"])))).toBe(
      "Hello gateway (42) \\ done"
    )
  })

  it("separates pages with a blank line and accepts wrapped base64", async () => {
    const wrapped = b64(["First page", "Second page"]).replace(/.{76}/g, "$&\n")
    expect(await Effect.runPromise(parser.pdfToText(wrapped))).toBe("First page\n\nSecond page")
  })

  it("works through the port and replaceDocuments", async () => {
    const body = {
      model: "m",
      messages: [{
        role: "user",
        content: [{
          type: "document",
          title: "Memo",
          source: { type: "base64", media_type: "application/pdf", data: b64(["Quarterly numbers"]) }
        }]
      }]
    }
    const program = Effect.flatMap(
      DocumentParser.DocumentParser,
      (service) => DocumentParser.replaceDocuments(body, service.pdfToText)
    ).pipe(Effect.provide(PdfDocumentParser.layer()))
    const out = await Effect.runPromise(program)
    expect((out.messages as Array<{ content: unknown }>)[0].content).toEqual([
      { type: "text", text: "Memo:\nQuarterly numbers" }
    ])
  })

  it("bounds the page count and the size", async () => {
    const pages = await failure(PdfDocumentParser.make({ maxPages: 2 }), b64(["1", "2", "3"]))
    expect(pages).toMatchObject({ _tag: "DocumentParseFailed", reason: "too_large" })
    expect(pages.message).toContain("3 pages; at most 2")
    const size = await failure(PdfDocumentParser.make({ maxBytes: 100 }), b64(["big enough"]))
    expect(size.reason).toBe("too_large")
  })

  it("rejects data that is not base64, not a PDF, or a damaged PDF", async () => {
    expect((await failure(parser, "not base64!")).reason).toBe("invalid")
    expect((await failure(parser, Buffer.from("hello world, no pdf").toString("base64"))).message).toContain(
      "not a PDF"
    )
    const damaged = await failure(parser, Buffer.from("%PDF-1.4\nthis is not a pdf body").toString("base64"))
    expect(damaged.reason).toBe("invalid")
    expect(damaged.message).toContain("cannot be read")
  })
})
