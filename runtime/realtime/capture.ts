/**
 * Capture for live subscribers (docs/realtime.md "From a write to a subscriber"). A data statement's
 * capture (runtime/webhooks/capture.ts, svcgen.capture_events) writes an event for every changed
 * row while any process holds a live subscriber for the table (an unexpired row in
 * svcgen.live_interest), whether or not a webhook wants it, and sends the statement's event ids on
 * the shared channel by NOTIFY (svcgen.live_notify: `<topic>:<environment>\t<table>\t<id>,<id>,...`,
 * 150 ids a message), which PostgreSQL delivers on commit, in commit order, and never for a
 * rolled-back write. Events for live subscribers alone get no delivery.
 */

/** The topic of a statement's event ids on the channel: `<environment>\t<table>\t<id>,<id>,...`. */
export const LIVE_TOPIC = 'live';
