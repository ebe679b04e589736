/**
 * Whether a client is taking what the server writes, for the stall checks
 * (an event stream's, and the one of every other answer): a mark that moves
 * whenever bytes leave the process for the client.
 */
import type { Socket } from 'node:net';

/** The part of libuv's stream handle this reads: the bytes of the write in flight not yet in the kernel. */
interface WriteQueue {
  writeQueueSize?: number;
}

/**
 * A number that changes when the client takes bytes: `bytesWritten - writableLength` (the writes done) moves
 * only once a whole write has gone, and one large write (a 32 MB frame, a JSON answer) to a client reading
 * steadily but slowly takes longer than the stall — a probe's reader, never idle more than a few ms, was cut
 * mid-answer as if it read nothing. libuv's `writeQueueSize`, what is left of the write in flight, shrinks as
 * the kernel takes each part; subtracted, the mark moves with it. (It grows only when a new write starts,
 * which happens once the one before is done: a move too.) The kernel takes a blocked write in parts of about a
 * third of its send buffer, so that is how often a slow reader is seen moving.
 */
export function takenMark(socket: Socket): number {
  const queued = (socket as Socket & { _handle?: WriteQueue | null })._handle?.writeQueueSize ?? 0;
  return socket.bytesWritten - socket.writableLength - queued;
}
