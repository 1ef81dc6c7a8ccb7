export { createMailer, type MailMessage, type Mailer, type MailerOptions } from './mailer.ts';
