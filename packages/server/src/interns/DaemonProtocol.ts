/**
 * The messages between the gateway (`LocalInternRuntime`) and an intern's daemon process, over the IPC channel of the
 * process: the daemon's start-up (its intern, its key, where to listen), and the turns it relays from an attached
 * terminal with their answers.
 */

/** From the gateway to the daemon. */
export type ToDaemon =
  | {
    readonly type: "start"
    readonly internId: string
    /** The intern's daemon key, base64. */
    readonly key: string
    readonly host: string
  }
  | { readonly type: "delta"; readonly turn: number; readonly content: string }
  | { readonly type: "done"; readonly turn: number; readonly sessionId: string; readonly usage: unknown }
  | { readonly type: "error"; readonly turn: number; readonly message: string; readonly reason: string }

/** From the daemon to the gateway. */
export type FromDaemon =
  | { readonly type: "listening"; readonly port: number }
  | {
    readonly type: "chat"
    readonly turn: number
    readonly sessionId: string | undefined
    readonly content: string
  }
  | { readonly type: "cancel"; readonly turn: number }
