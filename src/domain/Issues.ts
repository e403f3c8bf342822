/**
 * Validation issues a person can act on, from Schema's decode failures (the server's 422 and the typed client's own
 * checks say the same). Schema reports a refused union of literals as one issue per member ("Expected \"blaxel\",
 * actual \"nope\"", thirteen times for a provider); here it is one issue with the allowed values
 * (`provider must be one of: blaxel, cloudflare, …`, `allowed` listing them). A string where an array is expected is
 * said as such, and `command` as a string is told to be an argv array. Everything else keeps Schema's words.
 */

export interface Issue {
  /** Dotted path to the field (`resources.architecture`), "" for the body itself. */
  readonly path: string
  readonly message: string
  /** For a value outside a fixed set: the values allowed there. */
  readonly allowed?: ReadonlyArray<string>
}

/** An issue as Schema's ArrayFormatter gives it. */
export interface RawIssue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** An issue's message quotes the value it refused: a huge value is not sent back whole. */
const MAX_ISSUE_MESSAGE = 500
const bounded = (message: string) => (message.length <= MAX_ISSUE_MESSAGE ? message : `${message.slice(0, MAX_ISSUE_MESSAGE)}…`)

const EXPECTED = /^Expected (.+), actual ([\s\S]*)$/
/** A literal as Schema prints it: a JSON string, a number, true, false, null, or undefined (an optional field). */
const LITERAL = /^(?:"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null|undefined)$/

const literalsOf = (messages: ReadonlyArray<string>): Array<string> | undefined => {
  const all: Array<string> = []
  for (const message of messages) {
    const match = EXPECTED.exec(message)
    if (match === null) return undefined
    const members = match[1]!.split(" | ")
    if (!members.every((m) => LITERAL.test(m))) return undefined
    all.push(...members)
  }
  const values = all.filter((m) => m !== "undefined").map((m) => (m.startsWith("\"") ? (JSON.parse(m) as string) : m))
  return values.length === 0 ? undefined : [...new Set(values)]
}

const TYPE_WORDS: Record<string, string> = { string: "a string", number: "a number", boolean: "true or false" }

/** An optional field's other alternative: said once for every refused value, it adds nothing. */
const UNDEFINED_ALTERNATIVE = /^Expected undefined, actual /

const readable = (path: string, all: ReadonlyArray<string>): Issue => {
  const name = path === "" ? "the body" : path
  const allowed = literalsOf(all)
  const others = all.filter((m) => !UNDEFINED_ALTERNATIVE.test(m))
  const messages = others.length > 0 ? others : all
  if (allowed !== undefined) return { path, message: bounded(`${name} must be one of: ${allowed.join(", ")}`), allowed }
  const match = messages.length === 1 ? EXPECTED.exec(messages[0]!) : null
  if (match !== null) {
    const [, expected, actual] = match as unknown as [string, string, string]
    if (expected.startsWith("ReadonlyArray<") && !actual.startsWith("[")) {
      if (path === "command" || path.endsWith(".command")) {
        const example = actual.startsWith("\"") ? `["sh", "-c", ${actual}]` : `["ls", "-la"]`
        return { path, message: bounded(`${name} is an argv array: send the program and its arguments as a list of strings, e.g. ${example}`) }
      }
      return { path, message: bounded(`${name} must be an array`) }
    }
    const words = TYPE_WORDS[expected]
    if (words !== undefined) return { path, message: bounded(`${name} must be ${words}`) }
  }
  return { path, message: bounded(messages[0] ?? "is not valid") }
}

/** Schema's issues made readable: one per field, in the order they came (see the module comment). */
export const readableIssues = (raw: ReadonlyArray<RawIssue>): Array<Issue> => {
  const byPath = new Map<string, Array<string>>()
  for (const issue of raw) {
    const path = issue.path.map(String).join(".")
    const messages = byPath.get(path) ?? []
    messages.push(issue.message)
    byPath.set(path, messages)
  }
  return [...byPath].map(([path, messages]) => readable(path, messages))
}

/** One line for the envelope's `message`: the first issue (with its field), and how many more there are. */
export const issuesSummary = (issues: ReadonlyArray<Issue>): string => {
  const first = issues[0]
  if (first === undefined) return "Request validation failed"
  const text = first.path === "" || first.message.startsWith(first.path) ? first.message : `${first.path}: ${first.message}`
  return issues.length === 1 ? text : `${text} (and ${issues.length - 1} more in details.issues)`
}
