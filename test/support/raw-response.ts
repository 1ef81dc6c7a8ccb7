/**
 * An HTTP/1.1 answer read off a raw socket (tests that trickle bodies or hold connections open,
 * which fetch cannot), with a JSON body: status, lower-cased headers, parsed body.
 */
export function parseRawResponse(text: string): { status: number; headers: Record<string, string>; body: any } {
  const end = text.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(text.slice(end + 4)) };
}
