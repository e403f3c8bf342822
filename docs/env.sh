# The shell set-up the guides' examples use. Source it from bash in a checkout: `. docs/env.sh`
#
#   GW        the gateway's URL (default http://127.0.0.1:8080; set it first for another)
#   KEY, PRJ  a project API key and its project; UT a user access token; ORG the organization.
#             Unless KEY is already set, `bun run cli bootstrap` makes (or reuses) the user SGW_EMAIL
#             (default you@example.com) with an organization, a project and a key, on the server's DATA_DIR
#             (default ./data, as `npm start` uses).
#   H, K, A   curl arguments: H for sandbox routes (key, project header, JSON), K the same without the JSON
#             content type (for the raw file routes), A for account routes (user token, JSON).
#   pick F    prints field F (dotted: sandbox.id, organizations.0.id) of the JSON on stdin.
#   wait_op OP | wait_proc SBX P | wait_rop SBX ROP
#             wait until an operation, process or runtime operation has ended and print it (JSON).

GW=${GW:-http://127.0.0.1:8080}

# bun, not node: it starts in a third of the time, and the polls below call pick every 0.2 s.
pick() { PICK="$1" bun -e 'let v=JSON.parse(require("fs").readFileSync(0,"utf8"));for(const k of process.env.PICK.split("."))v=v?.[k];console.log(typeof v==="object"?JSON.stringify(v):v)'; }

if [ -z "${KEY:-}" ]; then
  BOOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && bun run --silent cli bootstrap --email "${SGW_EMAIL:-you@example.com}" --json)
  KEY=$(echo "$BOOT" | pick api_key); PRJ=$(echo "$BOOT" | pick project_id)
  UT=$(echo "$BOOT" | pick user_token); ORG=$(echo "$BOOT" | pick organization_id)
fi
K=(-H "Authorization: Bearer $KEY" -H "X-Metal-Project-ID: $PRJ")
H=("${K[@]}" -H "Content-Type: application/json")
A=(-H "Authorization: Bearer ${UT:-}" -H "Content-Type: application/json")

# Polls $1 (a route) every 0.2 s until its "state" is one of the terminal states in $2, then prints it; an answer
# without a state (an error) ends the wait at once.
_wait_state() {
  local body state
  for _ in $(seq 1 600); do
    body=$(curl -s "${H[@]}" "$GW$1")
    state=$(echo "$body" | pick state)
    case " $2 " in *" $state "*) echo "$body"; return 0 ;; esac
    # An error answer (no state: a wrong id, a key without access) will not change by waiting.
    [ "$state" = undefined ] && { echo "no state in the answer of $1: $body" >&2; return 1; }
    sleep 0.2
  done
  echo "still not finished after 120 s: $body" >&2; return 1
}
wait_op() { _wait_state "/v1/operations/$1" "succeeded failed cancelled"; }
wait_proc() { _wait_state "/v1/sandboxes/$1/processes/$2" "succeeded failed cancelled timed_out"; }
wait_rop() { _wait_state "/v1/sandboxes/$1/runtime-operations/$2" "succeeded failed"; }
