/**
 * Answers for requests node:http cuts off before (or while) a handler runs: a head or body that
 * arrives too slowly (408), a head over the size limit (431), broken syntax (400). Node's own
 * answers have no body, and with a 'clientError' listener it answers nothing, so this writes a
 * Problem Details response straight onto the socket and closes it.
 */
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { PROBLEM_KINDS, type ProblemKind } from '../model/problem-kinds.ts';

export interface ClientErrorLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** Largest request line plus headers, in bytes. */
  maxHeaderSize: number;
}

interface ClientErrorAnswer {
  status: number;
  reason: string;
  type: string;
  detail: string;
}

function answer(kind: ProblemKind, detail: string): ClientErrorAnswer {
  const { status, title } = PROBLEM_KINDS[kind];
  return { status, reason: title, type: `/errors/${kind}`, detail };
}

/** What a parser or timeout error from node:http means for the client, or undefined when nothing can be said. */
export function clientErrorAnswer(
  error: NodeJS.ErrnoException,
  limits: ClientErrorLimits,
): ClientErrorAnswer | undefined {
  switch (error.code) {
    case 'ECONNRESET':
    case 'EPIPE':
      return undefined;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return answer(
        'request-timeout',
        `the request did not arrive in time: headers are allowed ${limits.headersTimeoutMs} ms and the whole request ${limits.requestTimeoutMs} ms; send it again on a new connection`,
      );
    case 'HPE_HEADER_OVERFLOW':
      return answer(
        'request-header-too-large',
        `the request line and headers exceed ${limits.maxHeaderSize / 1024} KiB; send long filters in a POST /<table>/_query body`,
      );
    default:
      return answer('bad-request', 'the request is not valid HTTP/1.1');
  }
}

/** A 'clientError' listener for a node:http server. */
export function clientErrorHandler(limits: ClientErrorLimits): (error: NodeJS.ErrnoException, socket: Duplex) => void {
  return (error, socket) => {
    const answer = clientErrorAnswer(error, limits);
    // A response already under way (a body cut off mid-request after the handler wrote headers)
    // cannot be followed by another status line without corrupting the stream.
    const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (!answer || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify({
      type: answer.type,
      title: answer.reason,
      status: answer.status,
      detail: answer.detail,
      instance: '',
      errors: [],
    });
    socket.write(
      `HTTP/1.1 ${answer.status} ${answer.reason}\r\n` +
        `Content-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    // destroySoon: close once the answer is flushed, so a client that never closes cannot keep a half-open socket.
    (socket as Duplex & { destroySoon?: () => void }).destroySoon?.() ?? socket.end();
  };
}
