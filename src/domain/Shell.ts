/** Text as one word of a POSIX shell command line: as it is when that is safe, else single-quoted. */
export const shellWord = (text: string): string => (/^[A-Za-z0-9_\/.,:@%+=-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`)
