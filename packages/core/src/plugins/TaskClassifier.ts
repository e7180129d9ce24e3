/**
 * The task classifier port the auto-router uses, and the default deterministic keyword/feature classifier.
 *
 * The default classifier reads the text of the latest user message that has text (tool-result-only turns are
 * skipped) and, lightly, the system prompt. Each text is scored against the rules in `rules` below:
 *
 * - a rule with `cap` scores `points` per distinct (case-insensitive) matched word, up to `cap` words;
 * - a rule without `cap` scores `points` once when its pattern matches.
 *
 * The score of a task is `user + 0.25 * system`. The task with the highest score wins when that score is at least
 * 1; ties go to the earlier task of `code, math, analysis, writing`; a conversation scoring below 1 everywhere is
 * `chat`. Only the first 16384 characters of each text are read.
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"
import type { Task } from "../catalogue/Catalogue.js"

/** Classifies a conversation into a task; pure and synchronous so that routing stays a pure function. */
export interface TaskClassifierService {
  /** `messages` and `system` are the request's fields as sent (plain JSON); anything unexpected is ignored. */
  readonly classify: (messages: unknown, system: unknown) => Task
}

/** Port: the auto-router's task classifier. */
export class TaskClassifier extends Context.Tag("@model-gateway/core/TaskClassifier")<
  TaskClassifier,
  TaskClassifierService
>() {}

/** Every task, in tie-break order (the fallback, `chat`, last). */
export const tasks: ReadonlyArray<Task> = ["code", "math", "analysis", "writing", "chat"]

/** One scoring rule of the default classifier. */
export interface Rule {
  readonly task: Task
  readonly name: string
  readonly points: number
  readonly pattern: RegExp
  /** When present, `points` per distinct matched word, at most `cap` words; otherwise `points` once. */
  readonly cap?: number | undefined
}

/** The rules of the default classifier, documented by their names. */
export const rules: ReadonlyArray<Rule> = [
  // code
  { task: "code", name: "code fence", points: 3, pattern: /```/ },
  {
    task: "code",
    name: "stack trace",
    points: 3,
    pattern:
      /Traceback \(most recent call last\)|^\s+at \S+ \(?\S+:\d+(?::\d+)?\)?\s*$|\b[A-Z]\w*(?:Error|Exception)\b: |\bpanicked at\b|\bsegmentation fault\b/im
  },
  {
    task: "code",
    name: "code syntax",
    points: 2,
    pattern:
      /^\s*(?:def \w+\(|class \w+[:({]|import \w|from \S+ import |#include\b|function \w*\(|(?:const|let|var) \w+ =|(?:public|private|protected) (?:static )?\w|fn \w+\(|func \w+\(|package \w|select .+ from )|=>|\)\s*\{\s*$|;\s*$/im
  },
  {
    task: "code",
    name: "programming words",
    points: 1,
    cap: 3,
    pattern:
      /\b(?:code|function|method|bug|debug\w*|compil\w+|refactor\w*|regex|python|javascript|typescript|java|rust|golang|c\+\+|sql|api|script|program\w*|variable|unit tests?|git|docker|npm|endpoint|algorithm)\b/gi
  },
  // math
  {
    task: "math",
    name: "arithmetic",
    points: 2,
    pattern: /\d\s*[+*×÷^]\s*\d|\d\s*=\s*\d|\d\s+[-/]\s+\d/
  },
  {
    task: "math",
    name: "math notation",
    points: 2,
    pattern: /\\(?:frac|int|sum|sqrt|lim|cdot|pi|infty)\b|[∫∑√π≤≥≠∞]|\$[^$\n]+\$/
  },
  {
    task: "math",
    name: "algebra",
    points: 2,
    pattern: /\b[a-z]\s*\^\s*\d|\b\d*[a-z]\s*[+-]\s*\d+\s*=|\bf\([a-z]\)/i
  },
  {
    task: "math",
    name: "math words",
    points: 1,
    cap: 3,
    pattern:
      /\b(?:prove|proof|solve|integral|integrate|derivative|differentiate|equation|theorem|lemma|calculate|probability|matrix|eigen\w+|polynomial|factorial|algebra|geometry|calculus|arithmetic|modulo|prime numbers?)\b/gi
  },
  // analysis
  {
    task: "analysis",
    name: "data table",
    points: 2,
    pattern: /^\s*\|?[^\n|]*\|[^\n]*\n\s*\|?\s*:?-{3,}|(?:^[^\n,]*\d[^\n,]*(?:,[^\n,]*){2,}\n){3}/m
  },
  {
    task: "analysis",
    name: "analysis words",
    points: 1,
    cap: 3,
    pattern:
      /\b(?:analy[sz]\w*|compar\w*|contrast\w*|summar\w*|evaluat\w*|assess\w*|pros and cons|trade-?offs?|insights?|trends?|breakdown|interpret\w*|versus)\b/gi
  },
  // writing
  {
    task: "writing",
    name: "writing request",
    points: 3,
    pattern:
      /\b(?:write|draft|compose|create)\b[^.?!\n]{0,40}?\b(?:story|stories|poem|essay|e-?mail|letter|blog post|article|song|lyrics|speech|haiku|novel|limerick|sonnet|tweet|toast|eulogy|bio|newsletter)s?\b/i
  },
  {
    task: "writing",
    name: "editing request",
    points: 2,
    pattern: /\b(?:rewrite|re-write|rephrase|proofread|paraphrase|reword|copyedit|polish)\b/i
  },
  {
    task: "writing",
    name: "writing words",
    points: 1,
    cap: 2,
    pattern:
      /\b(?:story|poem|essay|e-?mail|letter|tone|narrative|character|plot|fiction|prose|verse|rhyme|headline|slogan)\b/gi
  }
]

const MAX_CHARS = 16384
const SYSTEM_WEIGHT = 0.25

/** The text of a message `content` or a `system` value: a string, or the `text` of its text blocks joined by newlines. */
export const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  let out = ""
  for (const block of content) {
    if (Predicate.isRecord(block) && block.type === "text" && typeof block.text === "string") {
      out = out === "" ? block.text : `${out}\n${block.text}`
    }
  }
  return out
}

/** The text of the latest user message that has any (turns carrying only tool results are skipped). */
export const latestUserText = (messages: unknown): string => {
  if (!Array.isArray(messages)) return ""
  for (let i = messages.length - 1; i >= 0; i--) {
    const message: unknown = messages[i]
    if (!Predicate.isRecord(message) || message.role !== "user") continue
    const text = textOf(message.content)
    if (text.trim() !== "") return text
  }
  return ""
}

/** The score of each task for one text, by `rules`. */
export const scoreText = (text: string): Record<Task, number> => {
  const scores: Record<Task, number> = { code: 0, math: 0, analysis: 0, writing: 0, chat: 0 }
  if (text === "") return scores
  const input = text.length > MAX_CHARS ? text.slice(0, MAX_CHARS) : text
  for (const rule of rules) {
    if (rule.cap === undefined) {
      if (rule.pattern.test(input)) scores[rule.task] += rule.points
      continue
    }
    const seen = new Set<string>()
    for (const match of input.matchAll(rule.pattern)) {
      seen.add(match[0].toLowerCase())
      if (seen.size >= rule.cap) break
    }
    scores[rule.task] += rule.points * seen.size
  }
  return scores
}

/** The combined score of each task: the latest user text in full, the system prompt at a quarter. */
export const score = (messages: unknown, system: unknown): Record<Task, number> => {
  const user = scoreText(latestUserText(messages))
  const sys = scoreText(textOf(system))
  for (const task of tasks) user[task] += SYSTEM_WEIGHT * sys[task]
  return user
}

/** The task of a set of scores: the best one scoring at least 1 (ties by `tasks` order), else `chat`. */
export const pick = (scores: Record<Task, number>): Task => {
  let best: Task = "chat"
  let bestScore = -1
  for (const task of tasks) {
    if (task !== "chat" && scores[task] >= 1 && scores[task] > bestScore) {
      best = task
      bestScore = scores[task]
    }
  }
  return best
}

/** The default classifier: `pick(score(messages, system))`. */
export const classify = (messages: unknown, system: unknown): Task => pick(score(messages, system))

/** The default deterministic keyword/feature classifier as a service. */
export const keywords: TaskClassifierService = { classify }

/** Provides the default classifier. */
export const layer: Layer.Layer<TaskClassifier> = Layer.succeed(TaskClassifier, keywords)
