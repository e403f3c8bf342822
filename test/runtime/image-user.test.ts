/**
 * An image's User resolved as Docker resolves it (src/runtime/oci/ImageUser.ts), over unpacked layers: every form
 * (`uid`, `uid:gid`, `name`, `name:group`, `uid:group`, `name:gid`, empty), the entry's gid and home, the first
 * matching entry, a file of an upper layer over a lower one's, and the failures (a name or group the image does
 * not have, an id out of range, a User that is no user). How the layers' whiteouts, opaque directories and symlinks
 * are read is in test/hostile/oci-layers.test.ts.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { ImagePullError } from "../../src/runtime/oci/Errors.ts"
import { MAX_ID, resolveImageUser } from "../../src/runtime/oci/ImageUser.ts"

const work = fs.mkdtempSync(path.join(os.tmpdir(), "image-user-"))
afterAll(() => fs.rmSync(work, { recursive: true, force: true }))
let n = 0

/** A layer directory holding `files` (path → content). */
const layer = (files: Record<string, string>) => {
  const dir = path.join(work, `l${n++}`)
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), text)
  }
  fs.mkdirSync(dir, { recursive: true })
  return dir
}

const PASSWD = [
  "root:x:0:0:root:/root:/bin/sh",
  "# a comment, and a malformed line:",
  "broken:x:notanumber:1::/nowhere:/bin/sh",
  "app:x:1234:2345:App:/home/app:/bin/sh",
  "app:x:9999:9999:a second app (the first wins):/home/other:/bin/sh",
  "nohome:x:3000:3000::relative/home:/bin/sh",
  ""
].join("\n")
const GROUP = "root:x:0:\nstaff:x:50:app\nappgrp:x:2345:\n"
const image = [layer({ "etc/passwd": PASSWD, "etc/group": GROUP })]

const refused = (user: string, layers = image) => {
  try {
    resolveImageUser(user, layers)
  } catch (e) {
    expect(e).toBeInstanceOf(ImagePullError)
    return e as ImagePullError
  }
  throw new Error(`${user} resolved`)
}

describe("an image's User", () => {
  it("empty is root, with root's home", () => {
    expect(resolveImageUser("", image)).toEqual({ uid: 0, gid: 0, name: "root", home: "/root" })
  })

  it("a name takes its uid, gid and home from the first matching entry", () => {
    expect(resolveImageUser("app", image)).toEqual({ uid: 1234, gid: 2345, name: "app", home: "/home/app" })
  })

  it("a uid with an entry takes the entry's gid and home; one without runs with gid 0 and no home", () => {
    expect(resolveImageUser("1234", image)).toEqual({ uid: 1234, gid: 2345, name: "app", home: "/home/app" })
    expect(resolveImageUser("4321", image)).toEqual({ uid: 4321, gid: 0 })
  })

  it("an explicit group, by number or by name, replaces the entry's gid", () => {
    expect(resolveImageUser("4321:77", image)).toEqual({ uid: 4321, gid: 77 })
    expect(resolveImageUser("app:88", image)).toEqual({ uid: 1234, gid: 88, name: "app", home: "/home/app" })
    expect(resolveImageUser("app:staff", image)).toEqual({ uid: 1234, gid: 50, name: "app", home: "/home/app" })
    expect(resolveImageUser("4321:staff", image)).toEqual({ uid: 4321, gid: 50 })
    // An empty group part is no group.
    expect(resolveImageUser("app:", image)).toEqual({ uid: 1234, gid: 2345, name: "app", home: "/home/app" })
    expect(resolveImageUser(`${MAX_ID}:${MAX_ID}`, image)).toEqual({ uid: MAX_ID, gid: MAX_ID })
  })

  it("a home that is not an absolute path is not used", () => {
    expect(resolveImageUser("nohome", image)).toEqual({ uid: 3000, gid: 3000, name: "nohome" })
  })

  it("an upper layer's /etc/passwd is the one read", () => {
    const upper = layer({ "etc/passwd": "app:x:555:556::/srv/app:/bin/sh\n" })
    expect(resolveImageUser("app", [upper, ...image])).toEqual({ uid: 555, gid: 556, name: "app", home: "/srv/app" })
    // A layer without the file lets the one below show through.
    expect(resolveImageUser("app", [layer({ "etc/hostname": "x\n" }), ...image])).toMatchObject({ uid: 1234 })
  })

  it("fails, naming the user, for a name or group the image does not have", () => {
    const user = refused("ghost")
    expect(user.reason).toBe("unknown_user")
    expect(user.message).toBe('its User "ghost": no user "ghost" in the image\'s /etc/passwd')
    expect(refused("app:ghosts").message).toBe('its User "app:ghosts": no group "ghosts" in the image\'s /etc/group')
    expect(refused("4321:ghosts").reason).toBe("unknown_user")
    // A malformed entry matches nothing.
    expect(refused("broken").reason).toBe("unknown_user")
    // No /etc/passwd at all: only numbers can be resolved.
    const bare = [layer({ "bin/app": "x" })]
    expect(refused("app", bare).message).toBe('its User "app": no user "app" in the image\'s /etc/passwd (the image has no usable /etc/passwd: there is none)')
    expect(resolveImageUser("", bare)).toEqual({ uid: 0, gid: 0 })
    expect(resolveImageUser("10:20", bare)).toEqual({ uid: 10, gid: 20 })
  })

  it("fails for ids out of range and for a User that is no user", () => {
    const big = refused(String(MAX_ID + 1))
    expect(big.reason).toBe("invalid_image")
    expect(big.message).toBe(`its User "${MAX_ID + 1}" names the uid "${MAX_ID + 1}", outside 0 to ${MAX_ID}`)
    expect(refused("1:99999999999").message).toMatch(/names the gid "99999999999", outside 0 to/)
    expect(refused("x".repeat(300)).message).toMatch(/is not a user/)
    expect(refused("a\nb").reason).toBe("invalid_image")
  })
})
