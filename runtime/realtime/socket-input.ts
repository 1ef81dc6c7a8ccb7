/**
 * The input bound of the subscription socket (docs/realtime.md "Lifecycle and limits"): every
 * graphql-ws message is scanned before graphql-ws parses it, and a payload (connection_init's,
 * subscribe's, any) nesting arrays and objects more than MAX_JSON_DEPTH levels deep, the bound of
 * every JSON body, closes the socket with graphql-ws's bad-request code 4400 and the reason. Past
 * that bound the subscription's preparation (variables coercion, the execution key) would recurse
 * once per level and overflow the stack.
 */
import { CloseCode } from 'graphql-ws';
import type { WebSocket } from 'ws';
import { boundJsonDepth, JsonBodyError } from '../http/index.ts';

/** `{"type":…,"payload":…}`: the level a message adds around its payload. */
const ENVELOPE_LEVELS = 1;

/**
 * Makes `ws` check each message before its listeners see it. graphql-ws's ws adapter offers no
 * hook between a frame and its JSON.parse, so the check sits in the socket's own emit; the text
 * decoded for it is what the listeners get (graphql-ws reads a message with String()).
 */
export function boundMessages(ws: WebSocket): void {
  const emit = ws.emit.bind(ws) as (event: string | symbol, ...args: unknown[]) => boolean;
  ws.emit = ((event: string | symbol, ...args: unknown[]) => {
    if (event !== 'message') return emit(event, ...args);
    const text = String(args[0]);
    try {
      boundJsonDepth(text, 'the message payload', ENVELOPE_LEVELS);
    } catch (error) {
      if (!(error instanceof JsonBodyError)) throw error;
      ws.close(CloseCode.BadRequest, error.message);
      return true;
    }
    return emit(event, text, ...args.slice(1));
  }) as typeof ws.emit;
}
