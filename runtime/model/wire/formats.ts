/**
 * Strings of answers with a JSON Schema format: the server writes them (it does not parse them),
 * so the format is said as metadata rather than checked.
 */
import { z } from 'zod';

export const uuidText = z.string().meta({ format: 'uuid' });
export const dateTimeText = z.string().meta({ format: 'date-time' });
