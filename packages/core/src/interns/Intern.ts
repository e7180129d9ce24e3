/**
 * An intern: a long-running agent owned by a workspace, with its system prompt (`instructions`), its model and a
 * lifecycle status; and its wire form, the record `@openrouter/sdk` validates (every key present, nullable ones as
 * `null`).
 */
import type { JsonObject } from "../messages/Wire.js"

/** The lifecycle statuses (see `InternStateMachine` for the moves between them). */
export const statuses = [
  "queued",
  "provisioning",
  "running",
  "failed",
  "stopped",
  "destroying",
  "destroy_failed"
] as const

export type InternStatus = typeof statuses[number]

export const isStatus = (value: string): value is InternStatus => (statuses as ReadonlyArray<string>).includes(value)

/** Where provisioning is: step `stepNumber` of `totalSteps`, named by `stepLabel`. */
export interface Progress {
  readonly stepLabel: string
  readonly stepNumber: number
  readonly totalSteps: number
}

export interface Intern {
  /** `intern_` and 20 hex digits: the creation time in milliseconds, then a sequence; newer ids sort after. */
  readonly id: string
  readonly workspace: string
  readonly name: string
  readonly description: string | null
  /** The intern's system prompt. */
  readonly instructions: string | null
  /** The model its chats run on; null until one is set (or a default is configured). */
  readonly model: string | null
  readonly status: InternStatus
  /** Only while provisioning. */
  readonly progress: Progress | null
  /** The host of its daemon, once provisioned. */
  readonly hostname: string | null
  readonly vaultId: string | null
  readonly attachedVaultId: string | null
  /** Why the last provisioning, suspension or destruction failed. */
  readonly lastFailureMessage: string | null
  /** Unix epoch milliseconds. */
  readonly createdAt: number
  readonly updatedAt: number
}

/** What a client may change with `PATCH /interns/{id}`. */
export interface InternEdits {
  readonly name?: string | undefined
  readonly description?: string | null | undefined
  readonly instructions?: string | null | undefined
  readonly model?: string | null | undefined
}

/** The intern record as clients read it. */
export const toWire = (intern: Intern): JsonObject => ({
  id: intern.id,
  name: intern.name,
  description: intern.description,
  instructions: intern.instructions,
  model: intern.model,
  status: intern.status,
  progress: intern.progress === null ? null : {
    step_label: intern.progress.stepLabel,
    step_number: intern.progress.stepNumber,
    total_steps: intern.progress.totalSteps
  },
  hostname: intern.hostname,
  workspace_id: intern.workspace,
  vault_id: intern.vaultId,
  attached_vault_id: intern.attachedVaultId,
  last_failure_message: intern.lastFailureMessage,
  created_at: new Date(intern.createdAt).toISOString(),
  updated_at: new Date(intern.updatedAt).toISOString()
})
