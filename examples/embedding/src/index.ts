export * as EmbeddingApp from "./main.js"
