/**
 * The `espeak-ng` package (an Emscripten build of the espeak-ng program; it ships no types): its default export makes a
 * module instance, runs the program's `main` with `arguments`, and resolves once `main` has returned.
 */
declare module "espeak-ng" {
  interface EspeakModuleOptions {
    readonly arguments?: ReadonlyArray<string>
    readonly preRun?: ReadonlyArray<(module: any) => void>
    readonly instantiateWasm?: (imports: unknown, done: (instance: unknown, module: unknown) => void) => unknown
    readonly print?: (line: string) => void
    readonly printErr?: (line: string) => void
  }
  const ESpeakNg: (options?: EspeakModuleOptions) => Promise<any>
  export default ESpeakNg
}
